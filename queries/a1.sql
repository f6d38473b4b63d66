-- A1: per outdoor station, the mean and the peak of fine particles over the last 10 minutes,
-- every minute, and how many readings they come from.
SELECT station, window_end, AVG(pm25) AS mean_pm25, MAX(pm25) AS peak_pm25,
       COUNT(*) AS readings
FROM HOP(air, observed_at, INTERVAL '1' MINUTE, INTERVAL '10' MINUTES)
WHERE NOT indoor
GROUP BY station, window_end
