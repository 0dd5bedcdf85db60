"""The local backend's DAG runner: DAGMan's job, done inside the gateway for DAGMan jobs submitted to it."""
