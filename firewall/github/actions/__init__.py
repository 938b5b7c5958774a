"""What talks to the Actions runner, through the files and streams it reads: workflow
commands (annotations), step outputs and the job summary. No network: the REST API
is the rest of ``firewall.github`` (``client.py`` is its one PyGithub import)."""
