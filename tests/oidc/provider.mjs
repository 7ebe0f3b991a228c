// A real OpenID provider for the sign-in tests: the certified `oidc-provider` package, run by Node.
// Usage: node provider.mjs CONFIG.json  (CONFIG: port, client_id, client_secret, redirect_uri,
// post_logout_redirect_uri, accounts: {login: claims}). Prints "ready <issuer>" once listening.
// The development login form (devInteractions) signs in whichever account name is typed (any
// password); consent is granted automatically (a first-party client), so the flow is: authorize →
// login form → code to the redirect URI. Accounts are read from CONFIG at each sign-in, so a test
// can move someone out of a group. Test-only: keys are generated at start and never kept.
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;
const SCOPES = 'openid email profile groups';

const provider = new Provider(issuer, {
  clients: [{
    client_id: config.client_id,
    client_secret: config.client_secret,
    redirect_uris: [config.redirect_uri],
    post_logout_redirect_uris: [config.post_logout_redirect_uri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  scopes: SCOPES.split(' '),
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  async findAccount(ctx, id) {
    const claims = JSON.parse(readFileSync(process.argv[2], 'utf8')).accounts[id];
    if (!claims) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...claims }; } };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope(SCOPES);
    await grant.save();
    return grant;
  },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  cookies: { keys: ['memwarden-test-only'] },
});
provider.listen(config.port, '127.0.0.1', () => console.log(`ready ${issuer}`));
