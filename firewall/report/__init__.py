"""Reports: the JSON artefact and its renderings."""
