"""The claim-to-role rule a tenant sets for sign-in through its OpenID provider."""

import pytest

from app.core.oidc_roles import OidcRule, parse_domains, parse_role_map

RULE = OidcRule("groups", parse_role_map("admins=admin, reviewers=reviewer,staff=viewer"), ("example.com",))


def claims(groups, email="rita@example.com", verified=True, **more):
    return {"sub": "s1", "email": email, "email_verified": verified, "groups": groups, **more}


def test_first_matching_entry_of_the_map_wins():
    assert RULE.role_for(claims(["staff", "reviewers"])) == "reviewer"
    assert RULE.role_for(claims(["reviewers", "admins"])) == "admin"
    assert RULE.role_for(claims("staff")) == "viewer"  # a claim may be one string


def test_no_matching_value_or_no_claim_gives_no_role():
    assert RULE.role_for(claims(["contractors"])) is None
    assert RULE.role_for({"sub": "s1", "email": "rita@example.com", "email_verified": True}) is None
    assert RULE.role_for(claims([{"admins": 1}, 7])) is None


def test_email_domains_admit_only_verified_addresses_or_the_hosted_domain():
    assert RULE.role_for(claims(["admins"], email="eve@evil.test")) is None
    assert RULE.role_for(claims(["admins"], verified=False)) is None  # an unverified address proves nothing
    assert RULE.role_for(claims(["admins"], email="eve@evil.test", hd="example.com")) == "admin"
    assert OidcRule("groups", (("admins", "admin"),)).role_for(claims(["admins"], email="x@any.test")) == "admin"


def test_the_rule_survives_the_settings_round_trip_in_order():
    assert OidcRule.from_doc(RULE.to_doc()) == RULE
    assert OidcRule.from_doc(None) is None and OidcRule.from_doc({"role_map": []}) is None
    assert OidcRule.from_doc({"role_map": "garbage"}) is None


@pytest.mark.parametrize("text", ["admins", "=admin", "admins=root", "a=admin," * 65])
def test_bad_role_maps_are_refused(text):
    with pytest.raises(ValueError):
        parse_role_map(text)


def test_domains_are_lower_cased_and_checked():
    assert parse_domains("Example.COM, example.org") == ("example.com", "example.org")
    for bad in ("user@example.com", "example", "http://example.com"):
        with pytest.raises(ValueError):
            parse_domains(bad)
