"""Helpers for tests/test_deploy.py: nginx installer and the deploy/ topology."""
