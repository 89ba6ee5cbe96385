"""Role code shared by the role packages, below them and above core."""
