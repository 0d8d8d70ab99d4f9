//! PostgreSQL, three replicas and HAProxy: limits and the ledger across replicas, a replica
//! killed and the database restarted mid-run.
