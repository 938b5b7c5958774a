"""Every file the firewall keeps: registry, history, probe parts; atomic writes and locks."""
