"""Static NodePools (``spec.replicas``, gate ``StaticCapacity``): the pure decisions (``decide``)
and the controller that keeps each pool at its replicas (``controller``)."""
