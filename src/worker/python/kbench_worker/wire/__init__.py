"""What a worker says to kbench and how: the protocol on its private pipes (`protocol`), the
typed requests and replies (`messages`), the error records a failure becomes (`errors`, with
`cause`'s one-line reasons), and the transfer of the candidate's outputs to the reference worker
(`transfer`).
"""
