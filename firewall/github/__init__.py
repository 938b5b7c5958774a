"""GitHub Actions integration: annotations, job summary, outputs and issues."""
