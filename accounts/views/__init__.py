"""Dashboard, key self-service, quota alert and usage-API views (accounts §10).

Every view resolves its account through ``accounts.selectors.dashboard_account_for`` (or,
for the usage API with a key, the key's own account) and reads through selectors.
"""
