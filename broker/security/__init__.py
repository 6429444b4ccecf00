"""Security: the ACL authorizer, ACL control and store (issue #13)."""
