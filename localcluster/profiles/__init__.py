"""Built-in node profiles for the localcluster simulator (YAML data files)."""
