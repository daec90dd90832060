use shedlock::scheduled;

#[derive(Clone)]
struct Db;
#[derive(Clone)]
struct Mailer;

#[scheduled(fixed_rate = "1m")]
async fn report(db: Db, mailer: Mailer) {
    let _ = (db, mailer);
}

fn main() {}
