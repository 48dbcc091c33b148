"""The apps.nvidia.com API group (NIM Operator kinds)."""
