"""The ledger: the only code that writes rows.

Every change of a partition's or a job's state, a claim, a lease, a host's own row, a
submission, a cancel or a retry is written here, in one transaction stamped with the next
value of its writer's status clock (``clock``: one per host, one for the web), and announced afterwards with a hint (``hints``). Readers
(engine.status) never write; the pipeline asks the ledger for every change it makes.

    clock     status clocks (StatusClock, one per writer) and the farm's version they sum to
    hints     "status.changed" messages on the channel layer, sent after commit
    claims    claiming queued partitions, and handing a claim back (one ``release_claim``)
    writer    StatusWriter: fenced, versioned transitions of one host's claims
    settle    a job's outcome derived from its partitions
    leases    renewing leases, and requeueing work whose host went quiet
    jobs      submit, cancel, retry (the API, the console, the admin and the commands)
    demo      demo jobs for a first run
"""
