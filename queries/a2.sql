-- A2: per station and quarter-hour, the mean humidity (of the readings that have one) and the
-- readings above 35 µg/m³ of fine particles.
SELECT station, window_end, AVG(humidity) AS mean_humidity,
       SUM(CASE WHEN pm25 > 35 THEN 1 ELSE 0 END) AS polluted, COUNT(*) AS readings
FROM TUMBLE(air, observed_at, INTERVAL '15' MINUTES)
GROUP BY station, window_end
