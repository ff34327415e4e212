-- The scheduled invocation reserves up to :wanted fan-out slots (sql/definitions/24), and learns how
-- many fan-out invocations are live with them.
SELECT slots, live FROM fanout_reserve(:deployment, :owner, CAST(:wanted AS integer), CAST(:max AS integer),
                                       make_interval(secs => :until_seconds))
