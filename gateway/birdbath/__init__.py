"""Birdbath, HTCondor's SOAP interface: the condorSchedd and condorCollector services on the SOAP codec
(``gateway.soap``), and the job and machine ads they answer, written straight to bytes and kept between queries."""
