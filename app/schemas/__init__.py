"""Request/response schemas: one family (XCreate / XPublic / XList) per entity."""
