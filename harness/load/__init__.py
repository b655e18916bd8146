"""Load generation: Locust users (locustfile), thread offload, exact recording, swarm control."""
