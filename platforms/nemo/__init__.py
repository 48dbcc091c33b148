"""The five NeMo microservice kinds as pure renders on one contract shape.

``contract.CONTRACTS`` maps each kind (NemoCustomizer, NemoDatastore,
NemoEntitystore, NemoEvaluator, NemoGuardrail) to its ``NemoContract``;
``common.NemoRenderer`` builds the objects all five share and each kind's
module adds its env, init containers, volumes, ConfigMaps, Secrets, PVCs and
Role rules. See docs/nemo.md.
"""
