"""Groups' ACLs in the auth store: written as one derived policy, read back from it."""

from __future__ import annotations

from itertools import islice

from mirror.auth.acl import NoAclError, acl_policy_name, acl_statements
from mirror.auth.model import Policy
from mirror.auth.policy_records import PolicyRecords
from mirror.auth.records import changes, encode, record_key

__all__ = ["AclRecords"]

_HAS_NO_ACL = "Policy attached to group has no ACL"
_MANY_POLICIES = "Multiple policies attached to group - no ACL"


class AclRecords(PolicyRecords):
    """The ACLs of groups, each kept as the policy ``ACL(_-_)<group>`` (:mod:`.acl`)."""

    @changes
    def set_group_acl(self, group_id: str, permission: str) -> Policy:
        """Give ``group_id`` the ACL ``permission``: its derived policy, and no other policy.

        The policy ``ACL(_-_)<group>`` is written (replacing an earlier one), attached to the
        group, and every other policy is detached from the group, as lakeFS's
        ``acl.WriteGroupACL`` does.

        Raises:
            BadAclPermissionError: ``permission`` is no ACL level (checked first, as lakeFS
                translates the ACL before anything else).
            GroupNotFoundError: no such group. lakeFS writes the policy before it finds the
                group missing; here nothing is written then.
        """
        statements = acl_statements(group_id, permission)
        self.get_group(group_id)
        name = acl_policy_name(group_id)
        policy = Policy(name, self.now(), statements, permission)
        # the name's parentheses are outside the IDs create_policy accepts: written directly
        self.kv.set(record_key("policies", name), encode(policy.to_dict()))
        others = [p for p in self._ids("group-policies", group_id) if p != name]
        self.kv.set(record_key("group-policies", group_id, name), b"")
        self.kv.set(record_key("policy-groups", name, group_id), b"")
        for policy_id in others:
            self.kv.delete(record_key("group-policies", group_id, policy_id))
            self.kv.delete(record_key("policy-groups", policy_id, group_id))
        return policy

    def group_acl(self, group_id: str) -> str:
        """Return the ACL permission of ``group_id``; ``""`` when no policy is attached to it.

        A group without policies has lakeFS's blank ACL, which allows nothing.

        Raises:
            GroupNotFoundError: no such group.
            NoAclError: one policy is attached but was not derived from an ACL, or several
                are (lakeFS's texts).
        """
        policies = list(islice(self.list_group_policies(group_id), 2))
        if not policies:
            return ""
        if len(policies) > 1:
            raise NoAclError(_MANY_POLICIES)
        if not policies[0].acl:
            raise NoAclError(_HAS_NO_ACL)
        return policies[0].acl
