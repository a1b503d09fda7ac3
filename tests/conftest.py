"""Test-suite wide settings.

In CI (CI=true) hypothesis runs derandomised: every property still runs its full example budget,
but with a fixed seed, so a green CI run is reproducible and a red one can be replayed exactly.
Random exploration happens on developer runs and with TESSERA_HYPOTHESIS_EXAMPLES for long hunts.

Every gang member count the core keeps between changes (`coscheduling.counted_count`, valid while
`ClusterState.members_version` stands) is checked against a full recount in every test that runs the
core in this process: a change to pods, placements or gang membership that forgets to move the version
fails the test that makes it instead of leaving a gang waiting on a stale count.
"""

from __future__ import annotations

import os

from hypothesis import settings

from scheduler.core.plugins import coscheduling

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")

coscheduling.VERIFY_COUNTS = True
