"""HTTP helpers shared by routers (request bodies the routers read themselves)."""
