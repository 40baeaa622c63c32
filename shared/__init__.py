"""graphfleet shared library: pure core used by every worker and the gateway.

Nothing in this package imports ``workers`` or ``api_gateway``.
"""
