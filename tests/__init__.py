"""nimctl's tests: unit, integration (localcluster), e2e (kubectl / nimctl), bench."""
