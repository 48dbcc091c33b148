"""The aiohttp TLS admission server: AdmissionReview v1 decoding, validating and
mutating handlers registered by path, JSONPatch responses, certificate reload.
"""
