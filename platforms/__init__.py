"""What a NIMService becomes on a platform (standalone, kserve): pure render
functions from a typed CR plus looked-up context to a list of objects.
"""
