"""Built-in defaulting."""
