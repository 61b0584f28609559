"""Tests against a real Spark standalone cluster (a package, so that its fixtures are torn
down once its last test ran, not at the end of the whole session)."""
