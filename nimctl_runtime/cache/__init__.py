"""Read side of the runtime: Reflector (list+watch), indexed Store, SharedInformer
and the label-filtered Cache that reconcilers read from instead of the API.
"""
