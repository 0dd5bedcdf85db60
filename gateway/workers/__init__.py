"""Worker processes serving the front ends around one core process (``workers = N``): the core's side
(:mod:`.parent`), the worker's (:mod:`.worker`), the link between them (:mod:`.link`) and what crosses it
(:mod:`.wire`)."""
