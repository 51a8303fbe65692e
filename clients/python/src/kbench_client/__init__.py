"""Client of `kbench serve`: send a task and a submission's source, get its verdict back.

The submission is sent as text and never imported here: it runs only in the service's sandbox.
"""

from kbench_client.client import Client, Result, ServiceError

__all__ = ["Client", "Result", "ServiceError"]
