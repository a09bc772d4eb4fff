// A person signing in to an AI app at their team's identity provider, for
// crates/switchboard/tests/real_authorization_server.rs: the app (this script) registers as a
// public client, sends the person's browser (headless Chromium: Debian's, driven by
// playwright-core) to the provider's authorization endpoint with PKCE S256 and Switchboard as
// the resource (RFC 8707), the person fills in the provider's login and consent pages, and the
// app redeems the code for an access token whose audience is Switchboard. The app then calls
// Switchboard with that token as itself would.
//
//   node idp-sign-in.mjs <issuer> <switchboard-audience> <login> <password>
//
// Prints one JSON line: {"accessToken"}. The app's redirect URI is answered inside the browser
// (playwright's request routing), so nothing has to listen for it. Exits non-zero, saying why,
// when a page or answer it expects does not come.
import { createHash, randomBytes } from "node:crypto";
import { launchChromium } from "./browser.mjs";

const [issuer, audience, login, password] = process.argv.slice(2);
if (!password) {
  console.error("usage: node idp-sign-in.mjs <issuer> <switchboard-audience> <login> <password>");
  process.exit(2);
}
const fail = (why) => {
  console.error(why);
  process.exit(1);
};
const json = async (response, what) => {
  const body = await response.json().catch(() => null);
  if (!response.ok || !body) fail(`${what}: HTTP ${response.status} ${JSON.stringify(body)}`);
  return body;
};

const metadata = await json(await fetch(`${issuer}/.well-known/openid-configuration`), "discovery");
const redirectUri = "http://127.0.0.1:9/app/callback";
const client = await json(await fetch(metadata.registration_endpoint, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({
    client_name: "An AI app",
    application_type: "native",
    redirect_uris: [redirectUri],
    token_endpoint_auth_method: "none",
    grant_types: ["authorization_code"],
    response_types: ["code"],
  }),
}), "registration");

const verifier = randomBytes(32).toString("base64url");
const state = randomBytes(16).toString("base64url");
const authorization = new URL(metadata.authorization_endpoint);
authorization.search = new URLSearchParams({
  response_type: "code",
  client_id: client.client_id,
  redirect_uri: redirectUri,
  scope: "openid switchboard",
  resource: audience,
  state,
  code_challenge: createHash("sha256").update(verifier).digest("base64url"),
  code_challenge_method: "S256",
}).toString();

const browser = await launchChromium();
let redirected;
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(20_000);
  const arrived = new Promise((resolve) => {
    page.route(`${redirectUri}**`, (route) => {
      resolve(new URL(route.request().url()));
      route.fulfill({ status: 200, contentType: "text/plain", body: "signed in" });
    });
  });
  await page.goto(authorization.toString());
  await page.fill('input[name="login"]', login);
  await page.fill('input[name="password"]', password);
  await Promise.all([page.waitForNavigation(), page.click('button[value="login"]')]);
  // Not waiting for a navigation: the redirect to the app is answered by the route above.
  await page.click('button[value="allow"]');
  redirected = await arrived;
} finally {
  await browser.close();
}
if (redirected.searchParams.get("state") !== state) fail(`the redirect's state differs: ${redirected}`);
const code = redirected.searchParams.get("code");
if (!code) fail(`no code in the redirect: ${redirected}`);

const tokens = await json(await fetch(metadata.token_endpoint, {
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams({
    grant_type: "authorization_code",
    code,
    redirect_uri: redirectUri,
    client_id: client.client_id,
    code_verifier: verifier,
    resource: audience,
  }),
}), "token request");
console.log(JSON.stringify({ accessToken: tokens.access_token }));
