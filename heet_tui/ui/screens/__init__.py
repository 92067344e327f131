"""One screen per room of the app: cluster, jobs, plan, profiles, hosts."""
