"""Driving real coding agents through the gateway: a capture server, a scripted upstream, the harness."""
