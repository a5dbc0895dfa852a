"""Measured results: the Parquet store, shared S3 storage, setup identities, hygiene checks and imports."""
