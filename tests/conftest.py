"""Test-suite wide settings.

In CI (CI=true) hypothesis runs derandomised: every property still runs its full example budget,
but with a fixed seed, so a green CI run is reproducible and a red one can be replayed exactly.
Random exploration happens on developer runs and with TESSERA_HYPOTHESIS_EXAMPLES for long hunts.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")
