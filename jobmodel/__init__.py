"""The job model the gateway's front ends and its backends share, and that imports neither: job states, universes,
actions and hold codes (``jobs``), evaluating job ads with classad2 (``classads``), HTCondor's argument and
environment syntax (``arguments``), the rules for files a client may name (``files``), and how expressions are
printed: clients' text kept, the rest in the old ClassAd syntax (``exprtext``)."""

#: the release of the birdbath-gateway distribution (the gateway and the backends shipped with it)
__version__ = "0.1.0"
