use mysqllock_core::*;
fn main() -> Result<()> {
    let url = std::env::var("MYSQLLOCK_TEST_DSN").unwrap();
    let mut a = NativeLocker::from_config(Config::from_url(&url)?);
    let mut b = NativeLocker::from_config(Config::from_url(&url)?);
    println!("init {:?}", a.init_table());
    let t = std::time::Instant::now();
    a.acquire("smoke", 0.0, 5.0)?;
    println!("a acquired {:?}", t.elapsed());
    println!("a again: {}", a.acquire("smoke", 1.0, 5.0).unwrap_err());
    println!("b: {}", b.acquire("smoke", 0.3, 5.0).unwrap_err());
    println!("b foo: {}", b.acquire("SMOKE ", 0.0, 5.0).unwrap_err());
    println!("a SMOKE: {}", a.acquire("SMOKE", 0.0, 5.0).unwrap_err());
    println!("remaining {:?}", a.assert_ttl("smoke", 1.0));
    println!("too short {}", a.assert_ttl("smoke", 100.0).unwrap_err());
    println!("status {:?}", b.status(None)?);
    a.release("smoke")?;
    println!("release again: {}", a.release("smoke").unwrap_err());
    b.acquire("smoke", 0.0, 5.0)?;
    println!("b got it");
    println!("bad name: {}", b.acquire("日本", 0.0, 5.0).unwrap_err());
    b.release("smoke")?;
    Ok(())
}
