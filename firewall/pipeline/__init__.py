"""A command's run as stages over one context: plan -> probe -> judge -> record -> publish."""
