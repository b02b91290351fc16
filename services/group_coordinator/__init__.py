"""The group coordinator: consumer-group membership, generations and assignments."""
