"""Every rendering of a run: terminal, Markdown, HTML, JUnit, the status view, calibration."""
