"""A3C / A2C: workers that act and compute policy-gradient updates, on the parameter server."""
