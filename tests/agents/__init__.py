"""Real coding agents through the gateway: a capture server, a scripted upstream, a harness."""
