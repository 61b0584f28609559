"""Hypothesis on a loaded 2-core CI machine: its "too slow" health check (data generation
slower than it likes) measures the machine, not the code, so it is off for every test here.
Each test's own settings (examples, deadline=None) still apply on top of this profile."""

from hypothesis import HealthCheck, settings

settings.register_profile("jetstream_sync", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("jetstream_sync")
