"""Local sites served on 127.0.0.1: the demo site and the test server."""
