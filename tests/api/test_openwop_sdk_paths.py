"""OpenWOP v2 paths Memwarden does not serve, as an OpenWOP SDK meets them (contract §7)."""

from tests.harness import bearer


def test_an_openwop_client_posting_to_a_v2_path_gets_not_found_not_a_csrf_refusal(client, make_key):
    sdk = {**bearer(make_key()), "OpenWOP-Version": "2.0", "Accept": "application/json"}
    client.cookies.clear()
    answer = client.post("/runs", json={"workflowId": "w"}, headers=sdk)
    assert answer.status_code == 404 and answer.json()["error"] == "not_found"
    # Without the header, or with a cookie, or marked cross-site, the CSRF check still applies.
    assert client.post("/runs", json={}, headers=bearer(make_key())).status_code == 403
    assert client.post("/review", json={}, headers={**sdk, "Cookie": "mw_csrf=" + "x" * 40}).status_code == 403
    client.cookies.clear()
    assert client.post("/runs", json={}, headers={**sdk, "Sec-Fetch-Site": "cross-site"}).status_code == 403
