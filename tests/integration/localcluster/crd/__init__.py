"""End-to-end CRD schema, CEL and patch behaviour through the localcluster HTTP server."""
