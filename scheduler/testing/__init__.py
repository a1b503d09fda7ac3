"""Test support shipped with the scheduler: fault injection and invariant checking."""
